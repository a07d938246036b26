"""HTA's choices and kernel types, where a user asks for HTA's numbers."""
