"""Local run artifacts (metrics.jsonl, summary.json, checkpoint.pt) and W&B logging."""
