"""What is generated from the mechanisms' declarations: the entry points' docstrings (checked against their
signatures), ``docs/parameters.md`` and the QGIS plugin's ``offered.json`` (:mod:`.docs`; ``dev/update-generated``
rewrites the files). The front ends generate their own forms from the declarations (``cli/declared.py``,
``server/processes/declared.py``, the QGIS plugin's ``declared.py``)."""
