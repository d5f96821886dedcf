"""Forensic readers of a BMC's own event log (Redfish LogServices, the IPMI SEL)."""
