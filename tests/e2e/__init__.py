"""`python run.py` as a process, the page in Chromium, the benchmark (marked `e2e`)."""
