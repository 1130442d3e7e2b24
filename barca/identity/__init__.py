"""What a result is keyed on: definition hashing, the cone of code a function reaches (helpers,
module-level state), and run hashes."""
