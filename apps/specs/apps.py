from django.apps import AppConfig


class SpecsConfig(AppConfig):
    name = "apps.specs"
    label = "specs"
