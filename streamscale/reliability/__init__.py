"""Delivery-reliability testing after TRAK (Wu, Shang and Wolter): semantics x faults -> loss and duplicate rates."""
