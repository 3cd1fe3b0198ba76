"""The cluster: getting a client, device workers, ``cluster.yaml``, ``dmap cluster up``,
the dashboard page and scaling runs."""
