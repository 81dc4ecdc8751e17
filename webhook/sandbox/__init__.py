"""The local control plane behind `gangkeeper sandbox`."""
