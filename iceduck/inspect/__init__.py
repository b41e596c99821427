"""iceduck.inspect"""
