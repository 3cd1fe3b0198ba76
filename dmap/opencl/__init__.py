"""The one layer that touches OpenCL: devices, contexts, compiled programs and the resident-block cache."""
