"""iceduck.catalog"""
