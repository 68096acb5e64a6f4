"""A CNC for keepon networks (issue 35): streams join and leave while the network runs.

Read the service, then follow the calls: :mod:`.command` (``keepon-plan cnc``) opens the :mod:`.store` (SQLite,
versioned schema), builds the :class:`~.service.Cnc` and serves :mod:`.http` (RESTCONF-style, aiohttp). A join's
body is read by :mod:`.tsn_types` (the 802.1Q ``ieee802-dot1q-tsn-types`` groups), placed by :mod:`.incremental`
around the streams in force with the network planner's first fit, recorded, and sent by :mod:`.distribute` to every
device it touches at one base time. :mod:`.bench` measures join latency and restart time.
"""
