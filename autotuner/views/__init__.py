"""Views: what the tool shows (tables, plots, timelines) computed from scenarios and records.

- :mod:`.explore` and :mod:`.scale`: the knob-space grid and the scaling what-ifs (pure).
- :mod:`.timeline_export` and :mod:`.timeline_compare`: simulated timelines and real-vs-simulated.
- :mod:`.accuracy`: predicted vs measured for every committed measurement.
- :mod:`.plots` and :mod:`.plots_explore`: matplotlib figures, written atomically.
"""
