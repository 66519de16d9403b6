"""The data machinery of hw4p1: what ``make data`` and ``make tokenizers`` run.

* ``corpus``: the embedded corpus generator (its words in ``lexicon/*.ini``);
* ``build_data``: writes ``hw4_data/hw4p1_data`` from the generator or from real text, with its
  data card and n-gram baselines (``ngram``);
* ``build_tokenizers``: trains the four tokenizers on the train split.

Nothing here is part of the assignment; the student code reads the data through
``hw4lib.data`` only.
"""
