"""The isolation: the processes the judge starts, bounded and killed whole (``processes``,
``cgroups``, ``parked_child``), the worker's sandbox (``sandbox_modes``, ``sandbox``,
``worker_folders``), the judge's own process (``judge_process``, ``thread_policy``,
``judge_zygote``) and where a built autograder's parts lie (``autograder_paths``, ``file_trees``).
Imports the intake, never the scoring."""
