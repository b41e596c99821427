"""iceduck.duckdb"""
