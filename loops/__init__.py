"""Agent loops: tasks, agents, red lines, stop guards and assertion-safe hints.

Pure Python: nothing here imports Django.
"""
