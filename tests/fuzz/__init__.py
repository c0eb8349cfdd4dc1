"""The fuzz campaign: ``python -m tests.fuzz --count N`` (see ``runner`` and ``cases``)."""
