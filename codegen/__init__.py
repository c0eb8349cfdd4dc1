"""pockengine: compile pretrained models into C firmware that trains in place."""

__version__ = "0.1.0"
