"""Delivery-reliability testing after TRAK (seed 003): semantics x faults -> loss and duplicate rates."""
