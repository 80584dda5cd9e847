"""The benchmark (`python -m bench`) and its side tools (broker_soak, delta_writers): tools, not the product."""
