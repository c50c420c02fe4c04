"""debug-stuck: find out why a training job stopped moving, and get it going again."""

__version__ = "0.1.0"
