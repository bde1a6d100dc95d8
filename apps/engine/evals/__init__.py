"""Evaluation suites and reference model policies (framework-free): humaneval.py holds the
HumanEval problems as workspaces; policies.py the oracle, null and wrong-first models."""
