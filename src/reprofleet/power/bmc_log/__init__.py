"""What a host's BMC logged around a wedge, read after recovery for the record's forensics.

Modules: ``events`` (the entries since an attempt started, on the controller's clock),
``redfish`` (Redfish LogServices), ``sel`` (IPMI System Event Log records, decoded).
"""
