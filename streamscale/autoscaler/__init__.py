"""Autoscaler concern: rebalance-aware bin packing of partitions onto consumers (Landau et al.)."""
