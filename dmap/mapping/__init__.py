"""A mapping job: the Dask graph and its loop, the task functions, chunk scheduling and the result."""
