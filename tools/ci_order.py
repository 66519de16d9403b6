"""A pytest plugin for ``make test-ci``: the longest tests first.

One session runs every test CI runs (``make test``, ``test-long``, ``test-class`` and
``test-platforms``) on two xdist workers, which steal queued tests from each other
(``--dist worksteal``). A worker idles only once both queues are empty, while the other finishes
its last test: started first, the tests of a minute or more (marked ``long`` and ``class_fixture``)
never end the session; the platform cells (seconds each) come next, the rest of the suite after.

    python -m pytest -n 2 --dist worksteal -p tools.ci_order ...
"""
import pytest

FIRST_MARKERS = (("long", "class_fixture"), ("platforms",))  # earlier groups start earlier


def rank(item: pytest.Item) -> int:
    """The index of the first group of FIRST_MARKERS that marks ``item``; the last rank if none."""
    for index, markers in enumerate(FIRST_MARKERS):
        if any(item.get_closest_marker(marker) for marker in markers):
            return index
    return len(FIRST_MARKERS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=rank)  # stable: each group keeps the collection order
