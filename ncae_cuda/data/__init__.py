"""The data: interactions and their id maps (interactions), the file formats (reader, over
table_parser), the named data sets (datasets, synthetic), the splits and the recency weights.
"""
