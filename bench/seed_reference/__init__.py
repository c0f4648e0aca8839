"""The seed's service design, rebuilt as the load benchmark's reference (``app.py``)."""
