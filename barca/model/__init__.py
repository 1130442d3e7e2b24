"""What a pipeline says: the decorators, discovery of files and notebook cells into a model,
partition key expressions, and the graph (topology)."""
