"""The test session's temporary folders (tests.grader.autograder_helpers.session_folder) are
removed at its end by this autouse fixture; session_folder refuses to run where it is not set up."""
from tests.grader.autograder_helpers import remove_session_folders  # noqa: F401 - an autouse fixture
