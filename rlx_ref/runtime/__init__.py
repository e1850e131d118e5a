"""Runtime: sessions that compile graphs for a device and run them."""
