"""The door's layers, one module per step of "What the door answers".

HTTP tier (never reads the body): ``public`` (1), ``auth.check_token`` (2),
``peer`` (3), ``planes`` (4), ``body`` (5).
RPC tier: ``envelope`` (6, 7), ``version`` (8), ``completion`` (9),
``methods`` (10), ``auth.check_scope`` (11), ``params`` (12), ``tenant`` (13).
"""
