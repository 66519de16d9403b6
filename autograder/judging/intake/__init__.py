"""The handin's intake: the archive copied bounded and extracted checked (``plain_tar``,
``safe_tar``), and its mytorch read, never run (``static_inspection`` with ``mytorch_resolver``
and ``runtime_code``, under ``handin_guard``). Standard library only; imports no other room."""
