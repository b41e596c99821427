"""iceduck.io"""
