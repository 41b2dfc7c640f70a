"""Autoscaler concern: rebalance-aware bin packing of partitions onto consumers (seed 001)."""
