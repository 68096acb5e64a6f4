"""Network-wide planning: keepon talkers and 802.1Qbv switches from one description (issue 21, parts 1 and 2).

``topology`` reads the description, ``stations`` chooses each talker's ring, ``routing`` builds each stream's
tree and no-wait hop times, ``schedule`` (greedy) and ``exact`` (CP-SAT) place the streams, ``gcl`` derives the
switches' gate control lists, ``output`` writes the plan directory, ``verify`` replays it independently,
``export_yang`` and ``export_taprio`` write the standard forms, ``bench`` measures scale, ``command`` is the CLI.
"""
