"""The medallion's rules, pure (Arrow or DataFrame in, the same out, no I/O): bronze, silver,
gold, lateness, corrections and the recount of a replay."""
