"""Ready adapters: `ulpcheck run --python <this folder>/torch_ops.py`."""
