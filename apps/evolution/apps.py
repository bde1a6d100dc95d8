from django.apps import AppConfig


class EvolutionConfig(AppConfig):
    name = "apps.evolution"
    label = "evolution"
