"""Runs: every model made of its settings or read from its file (factory), the protocol every
command runs on (select on validation, refit, test once), what a run
is (spec: its data and how it runs, its settings resolved), run folders (rundir), the pool of
runs (pool), tuning (tune_spec: what a study is; space, tuning, tune_study, study_outputs,
study_storage), the paper's experiments as runs (paper_tables), and what a report records of
the machine (environment).
"""
