"""Memory: memcpy/memset bandwidth and its summary, and the allocated/reserved memory timeline."""
