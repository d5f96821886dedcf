"""One small module per PDU/BMC protocol; ``power.registry`` maps an inventory's ``driver:`` to them."""
