"""`kvtier generate`: the files derived from a single source, written or checked for drift.

derived lists and writes them (values schemas, pod script copies, README tables, the rule
catalogue); readme renders the chart READMEs with the pinned helm-docs.
"""
