"""`kvtier bench`: the reference TTFT methodology, automated.

- stats: min/median/max of repeated measurements;
- prompts: prompts of a target token length (calibrated with the engine's /tokenize);
- methodology: TTFT sweep (cold, warm on the same replica, warm on another), multi-turn, concurrency;
- routing: repeated prompts through the router: which replica served them, and how fast;
- report: table, JSON, CSV and PNG plot.

Measurements use kvcheck's streaming client and metric reader (the one implementation).
"""
