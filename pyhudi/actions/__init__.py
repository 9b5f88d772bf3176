"""Actions that execute a plan: roll back an instant, run a clean, compact a file slice, order a
clustering group.

They end by completing their instant through the ``complete`` step they are handed
(:class:`pyhudi.timeline.completion.Complete`): the data table's commit point, or the metadata
table's plain completion when it maintains itself. They never import the commit point above them.
"""
