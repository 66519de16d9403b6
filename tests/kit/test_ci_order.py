# hw4p1: instructor-only
"""make test-ci's order (tools/ci_order.py): the tests of a minute or more first, then the
platform cells, then the rest, each group in collection order."""
from tools import ci_order


class Item:
    """What the plugin reads of a pytest item: its markers."""

    def __init__(self, name: str, *markers: str):
        self.name, self.markers = name, markers

    def get_closest_marker(self, marker: str):
        return marker if marker in self.markers else None


def test_long_and_class_tests_come_first_then_platform_cells_then_the_rest():
    items = [Item("fast-1"), Item("cell-1", "platforms"), Item("notebook", "long", "slow"),
             Item("fast-2", "slow"), Item("class", "class_fixture"), Item("cell-2", "platforms"),
             Item("digests", "long")]
    ci_order.pytest_collection_modifyitems(items)
    assert [item.name for item in items] == ["notebook", "class", "digests", "cell-1", "cell-2",
                                             "fast-1", "fast-2"]
