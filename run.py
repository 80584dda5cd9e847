#!/usr/bin/env python3
"""Trade Summary: the one entry point. `python run.py --help` explains every flag;
`python run.py load --help` the loader of trade files (landing zone -> Kafka)."""

import sys

from streaming.run.main import main


def create_dashboard(*args):
    from dashboard.app import create_app  # imported only when a dashboard is started: --help stays quick

    return create_app(*args)


if __name__ == "__main__":
    sys.exit(main(dashboard=create_dashboard))
