"""The only edge to a host: SSH transport, the system ssh for bulk bytes, the agent client and its replies."""
