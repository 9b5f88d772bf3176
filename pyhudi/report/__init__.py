"""Seeing a table: the figures of its own history (:mod:`~pyhudi.report.facts`), pictures of them
(:mod:`~pyhudi.report.charts`), one self-contained HTML page (:mod:`~pyhudi.report.page`) and
tuning advice derived from them (:mod:`~pyhudi.report.advisor`). All of it reads the timeline,
the commit metadata and the file listing; none of it reads data rows."""
