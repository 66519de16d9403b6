"""The scoring: the hidden tests and the judge of the mytorch categories (``hidden_tests/``,
``judge``, ``verdicts``, ``mytorch_categories``), the language model measured and scored
(``grade_model``, ``model_child``, ``language_model``, ``lm_diagnosis``, ``weights_fingerprint``,
``integrity``), the points (``rubric``), the report and the feedback (``report``, ``feedback``).
Imports the intake and the isolation."""
